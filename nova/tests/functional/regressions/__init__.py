"""Regression tests: each defect found from outside the project (an
operator, a stock test suite, a client) gets a test named for it here,
through the real REST API and services."""
