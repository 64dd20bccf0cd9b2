"""The one error type of the datasets package: a user's mistake or an unusable source.

The CLI prints it as a single line and exits 2; anything else is a bug and keeps its
traceback.
"""


class DataError(Exception):
    pass
