"""Fixtures for the runner's tests."""

import pytest


def pytest_configure(config):
    # looptime ships a pytest plugin that assumes pytest-asyncio is installed and
    # crashes on every fixture without it; the runner uses looptime, not its plugin.
    # (The project-wide fix is `-p no:looptime_plugin` in pytest's addopts.)
    config.pluginmanager.set_blocked("looptime_plugin")
    # torch warns on import when NumPy is absent; the runner does not use NumPy.
    config.addinivalue_line("filterwarnings", "ignore:Failed to initialize NumPy")


@pytest.fixture
def write_code(tmp_path):
    """Write candidate code to a file; returns its path as a string."""

    def write(source: str, name: str = "candidate.py") -> str:
        path = tmp_path / name
        path.write_text(source)
        return str(path)

    return write
