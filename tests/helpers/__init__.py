"""Shared test helpers: apps, servers, checks and workers the test folders use (no test file
imports another test file)."""
