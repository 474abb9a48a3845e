"""The server's scheduling loop around the pure scheduler of armada_core.scheduling."""
