"""Tests of the executors."""
