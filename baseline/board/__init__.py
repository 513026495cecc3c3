"""The board: its NPU software read over adb (software), the Lite2 capture bundle (capture), and
the facts `baseline env` prints (environment)."""
