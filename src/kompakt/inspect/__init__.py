"""Read-only operator views of a log: ``kompakt log dump|verify|explain``, and the log map.

Above the cleaner (the explain engine replays the cleaner's planning and offset-map rules over the
files) and beside the broker, which never imports it; the server's admin endpoint and log map page
and the ``kompakt log`` commands do, loading the native parts on first use. Nothing here writes a
file or takes a data directory's lock.
"""
