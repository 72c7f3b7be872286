"""Command-line tools, run as ``python -m pymx.tools.<name>``: im2rec (image folders to
RecordIO files)."""
