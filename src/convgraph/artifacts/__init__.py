"""Artifacts: the files a conversation speaks about, stored as content-addressed blocks."""
