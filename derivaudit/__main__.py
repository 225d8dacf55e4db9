"""`python -m derivaudit` runs the command line."""

from .cli import app

app(prog_name="derivaudit")
