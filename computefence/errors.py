"""Errors that end a command with one clear line instead of a traceback."""


class ComputeFenceError(Exception):
    """Base class: the message is shown to the user as is."""

    exit_code = 2


class ConfigError(ComputeFenceError):
    """Bad user input: an inventory, a flag value, a missing file. Exit 2."""


class InputLimitError(ConfigError):
    """An input built to hang or exhaust the reader: a FIFO, a device, too large, too deep,
    an alias bomb, a range of millions of hosts."""


class SourceError(ComputeFenceError):
    """A target source (inventory, provider API) could not be read."""


class ProbeOutputError(ComputeFenceError):
    """The probe's output could not be read as facts."""
