"""Kubernetes types carried by the Armada API (core/v1, networking/v1, apimachinery)."""
