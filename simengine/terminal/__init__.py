"""What the command line writes to a terminal (``terminal.cli``: a shared CLI helper, as the
architecture names them — only CLI modules import it)."""
