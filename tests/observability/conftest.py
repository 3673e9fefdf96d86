"""The CLI tests' run folder fixture, for the [logging] tests."""

from tests.cli.conftest import workdir  # noqa: F401 - a fixture, used by name
