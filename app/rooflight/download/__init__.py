"""Resumable, verified downloads into the Hugging Face cache (issue 4)."""
