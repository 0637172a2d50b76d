"""Support code for the test suite: the real control plane that integration tests run against."""
