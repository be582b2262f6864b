"""asyncssh, imported without the CryptographyDeprecationWarning blocks it triggers.

asyncssh names DSA types at import; cryptography 48 and later warn about each (five blocks on
stderr, ahead of every report and in every cron mail). The filter holds for the import only, so
no other warning of the user's program is hidden."""

import warnings

from cryptography.utils import CryptographyDeprecationWarning

with warnings.catch_warnings():
    warnings.simplefilter("ignore", CryptographyDeprecationWarning)
    import asyncssh

__all__ = ["asyncssh"]
