# Environment layer step, run by Dockerfile.env and by the bubblewrap layer builder alike.
# $1: the build context (wheels/, requirements.txt). Installs from the local wheels only.
cd "$1"
if grep -q . requirements.txt; then
    python3 -m pip install --no-index --no-cache-dir --break-system-packages \
        --find-links wheels -r requirements.txt
else
    python3 -m pip install --no-index --no-cache-dir --break-system-packages wheels/*.whl
fi
