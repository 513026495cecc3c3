"""Pinned, isolated RKNN-Toolkit2 environments and the worker that drives them.

The toolkit pins old libraries (numpy<=1.26.4, onnx<=1.18, torch<=2.4 for 2.5.0) and each
version pins different ones, so every toolkit version gets its own virtual environment in
a cache directory, and baseline talks to it through a worker subprocess. That also keeps
the toolkit's segfaults and hangs out of baseline's own process.
"""
