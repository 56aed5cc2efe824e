"""Project exceptions.  Each carries the exit code `msprof` returns for it; the CLI maps them to
a message and an exit status in exactly one place (`msprof_cli.cli.main`)."""
from __future__ import annotations


class MsprofError(Exception):
    """Base of every error msprof_cli reports to the user (message = what, where, how to fix)."""

    exit_code = 1


class OptionsError(MsprofError, ValueError):
    """A profiling option (PROFILING_OPTIONS key, CLI flag, Profiler argument) is invalid."""

    exit_code = 2


class UsageError(MsprofError):
    """The command line is wrong in a way click cannot see (e.g. empty command after --)."""

    exit_code = 2


class LaunchError(MsprofError):
    """The user's command could not be started."""

    exit_code = 127


class ProfDirError(MsprofError):
    """A path is not a PROF dir, or a PROF dir lacks what the command needs."""

    exit_code = 3


class RawDataError(MsprofError):
    """Raw data is damaged beyond what the decoder can skip."""

    exit_code = 4


class ExportError(MsprofError):
    """Export cannot proceed (bad model/iteration selection, unwritable output...)."""

    exit_code = 5
