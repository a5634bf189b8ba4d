"""Fixtures for the support package's own tests: the same Spark fixtures as the checks."""

pytest_plugins = ["streamlab.spark_fixtures"]
