#!/usr/bin/env python3
"""A stand-in `adb` for tests: no board exists on CI machines.

It answers `adb devices` and `adb -s SERIAL shell CMD` from a profile of realistic board
outputs (formats from Rockchip's manuals, rknn-facts.md §2.3), chosen by the serial.
"""

import sys

RK3588_LINUX = {
    "cat /proc/device-tree/compatible": "rockchip,rk3588-evb1-lp4-v10\x00rockchip,rk3588\x00",
    "cat /proc/device-tree/model": "Rockchip RK3588 EVB1 LP4 V10 Board\x00",
    "uname -r": "5.10.160\n",
    "rknpu": "RKNPU driver: v0.9.8\n",
    "test -e /usr/lib/librknnrt.so": "yes\n",
    "test -e /usr/bin/rknn_server": "yes\n",
    "librknnrt version": "librknnrt version: 2.3.0 (c949ad889d@2024-11-07T11:35:33)\n",
    "rknn_server version": "rknn_server version: 2.3.0 (e80ac5c build@2024-11-07T12:52:53)\n",
    "sha256sum /usr/lib/librknnrt.so": "9d3bb4e4b8d9d3c0a6b0c5f1c2b7e0a1f4d2c3b4a5968778695a4b3c2d1e0f9a"
    "  /usr/lib/librknnrt.so\n",
}
RV1106_BUILDROOT = {
    "cat /proc/device-tree/compatible": "rockchip,rv1106g-38x38-ipc-v10-spi-nand\x00rockchip,rv1106\x00",
    "cat /proc/device-tree/model": "Rockchip RV1106G38 EVB Board\x00",
    "uname -r": "5.10.110\n",
    "rknpu": "RKNPU driver: v0.9.2\n",
    "test -e /oem/usr/lib/librknnmrt.so": "yes\n",
    "test -e /oem/usr/bin/rknn_server": "yes\n",
    "librknnmrt version": "librknnmrt version: 1.6.0 (2de554906@2024-01-17T14:53:41)\n",
    "rknn_server version": "rknn_server version: 1.6.0 (0a6a9fa build@2024-01-17T15:03:33)\n",
    "sha256sum /oem/usr/lib/librknnmrt.so": "3f1e0c6c8c2b8a9d7e6f5a4b3c2d1e0f9a8b7c6d5e4f3a2b1c0d9e8f7a6b5c4d"
    "  /oem/usr/lib/librknnmrt.so\n",
}
BOARDS = {"rk3588-0001": RK3588_LINUX, "rv1106-0002": RV1106_BUILDROOT}


def main() -> int:
    args = sys.argv[1:]
    if args == ["devices"]:
        print("List of devices attached")
        for serial in BOARDS:
            print(f"{serial}\tdevice")
        print("offline-0003\toffline")
        return 0
    if len(args) >= 4 and args[0] == "-s" and args[2] == "shell":
        board = BOARDS.get(args[1])
        if board is None:
            print(f"adb: device '{args[1]}' not found", file=sys.stderr)
            return 1
        command = " ".join(args[3:])
        answer = next((text for key, text in board.items() if key in command), "")
        sys.stdout.write(answer)  # like a real shell: an absent file or unknown command prints nothing
        return 0
    print(f"fake adb: unsupported arguments {args}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
