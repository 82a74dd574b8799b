# Sourced by the scripts that run on the GPU machine (on_device.sh, ncu_*.sh),
# from the repository root: unpacks prepare.sh's bundle into .devcarry/ once,
# puts its libraries on the loader path, points KB_SHARED_DIR at its copy of
# ../shared, and sets $out to $OUT (or ./gpu-out), created.
[ -f .devcarry/bundle.tgz ] && { tar xzf .devcarry/bundle.tgz -C .devcarry && rm .devcarry/bundle.tgz; }
# (python's tarfile reads xz wherever the xz tool is missing)
[ -f .devcarry/bundle.txz ] && { python3 -c "import tarfile; tarfile.open('.devcarry/bundle.txz').extractall('.devcarry')" \
    && rm .devcarry/bundle.txz; }
export LD_LIBRARY_PATH="$PWD/.devcarry/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KB_SHARED_DIR="$PWD/.devcarry/shared"
out=${OUT:-gpu-out}
mkdir -p "$out"
