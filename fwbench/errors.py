"""The exceptions fwbench raises, in one tree. The ``fwbench`` command prints a FwbenchError as
one line and exits 2 (fwbench.cli.main), so a file that does not read (missing, empty, cut
short) is turned into one where it is read, naming the file and what is wrong.

FwbenchError
 ├── ConfigError        the sweep configuration is invalid or does not read (names the file, or
 │                      the key and the value)
 ├── ResultError        a result file or table is missing, malformed or of an unknown schema
 │                      version
 └── BackendError       a framework failed at the backend boundary
      └── Unsupported   the cell cannot run on this framework, device or input
                        (status `unsupported`)

ConfigWarning           a valid configuration that cannot give what a reader expects (a warm-up
                        too short to be steady): said, not refused, so smoke runs stay possible
"""

__all__ = ["FwbenchError", "ConfigError", "ResultError", "BackendError", "Unsupported",
           "ConfigWarning"]


class FwbenchError(Exception):
    """Base of every error fwbench raises on purpose."""


class ConfigError(FwbenchError):
    """The configuration does not validate."""


class ResultError(FwbenchError):
    """A result file cannot be read as a valid result."""


class BackendError(FwbenchError):
    """A framework call failed; the framework's exception is the cause."""


class Unsupported(BackendError):
    """The cell cannot run here; the message says why."""


class ConfigWarning(UserWarning):
    """A configuration that runs but cannot support verdicts; the message says why."""
