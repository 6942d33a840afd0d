"""Runnable examples built only from what `threadlog` exports (`threadlog demo`)."""
