# Instance layer step, run by Dockerfile.instance and by the bubblewrap layer builder alike.
# $1: the build context (repo.bundle, setup.sh); $2: the base commit to check out.
# The bundle holds only the base commit's history (see images.prune_bundle); the clone is
# then left with no ref, no remote, no reflog and no object the base commit cannot reach,
# so nothing in the image can show a later commit (the fix) to the agent.
git clone --quiet --no-checkout "$1/repo.bundle" /testbed
cd /testbed
git checkout --quiet --detach "$2"
git remote remove origin 2>/dev/null || true
git for-each-ref --format='%(refname)' | while read -r ref; do git update-ref -d "$ref"; done
rm -f .git/FETCH_HEAD .git/ORIG_HEAD .git/packed-refs
rm -rf .git/logs
git reflog expire --expire=now --all
git gc --quiet --prune=now
bash -eux "$1/setup.sh"
