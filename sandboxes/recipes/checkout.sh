# Instance layer step, run by Dockerfile.instance and by the bubblewrap layer builder alike.
# $1: the build context (repo.bundle, setup.sh); $2: the base commit to check out.
git clone --quiet --no-checkout "$1/repo.bundle" /testbed
cd /testbed
git checkout --quiet --detach "$2"
git remote remove origin
bash -eux "$1/setup.sh"
