#!/usr/bin/env bash
# Install everything nova needs on a fresh Debian machine: the libvirt client
# library and headers (libvirt-python builds against them), the hypervisor
# (QEMU/KVM, libvirtd, OVMF, qemu-img), what tools/build_test_image.py
# builds the real-hypervisor tests' image from, Chromium (the board picture
# test renders the HTML board headless), and a virtualenv in .venv
# with nova, its runtime and its test dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=(libvirt-dev libvirt0 pkg-config gcc python3-dev python3-venv
              qemu-system-x86 libvirt-daemon-system libvirt-clients ovmf
              qemu-utils
              busybox-static syslinux syslinux-common syslinux-efi mtools
              dosfstools
              chromium)
missing=()
for pkg in "${apt_packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' \
        || missing+=("$pkg")
done
if [ ${#missing[@]} -gt 0 ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi

PYTHON=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/pip install -q --disable-pip-version-check --upgrade pip
.venv/bin/pip install -q --disable-pip-version-check \
    -r requirements.txt -r test-requirements.txt
.venv/bin/pip install -q --disable-pip-version-check --no-deps -e .
