"""Process plumbing: every child process (children), the ONNX helper that runs untrusted graphs
under a time limit (isolated), shared onnxruntime sessions, and progress reporting."""
