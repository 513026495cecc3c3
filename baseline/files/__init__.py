"""Files and formats, each read defensively: atomic writes, hashes, tensors, images and pictures,
TOML, ONNX facts, the `.rknn` container, and strings made safe to print."""
