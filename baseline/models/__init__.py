"""Data models: plain, validated records. They import nothing else from baseline."""
