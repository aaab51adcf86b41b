# Grading step (see integrity.py), run in the repository of the grading sandbox after the
# agent's patch is applied and before the eval script: every changed path that belongs to the
# test infrastructure goes back to the base commit, or is removed if the base commit lacks it.
# $1: the base commit; $2: the untracked files of the pristine image (NUL-separated, listed
# before the patch was applied); $3: the instance's own test files (NUL-separated);
# $4: the extended regular expression of protected paths.
# Prints one line per restored or removed path (names quoted), nothing else.
set -u -o pipefail
base=$1 pristine=$2 spec=$3 protected=$4
root=$(pwd -P)

# Paths that differ from the pristine image: tracked ones that differ from the base commit
# (in the working tree or, after `git apply --3way`, the index), and untracked or ignored
# files the image did not have.
changed_paths() {
    {
        git diff --name-only -z --no-renames "$base" --
        git diff --cached --name-only -z --no-renames "$base" --
        comm -z -13 <(sort -z "$pristine") <(git ls-files --others -z | sort -z)
    } | sort -zu
}

# Directories inside the repository that PATH lists ("" and "." mean the working directory),
# relative to the root ("." for the root): a file there can stand in for a command.
declare -A search_dirs=()
IFS=: read -r -a path_dirs <<< "${PATH}:"
for dir in "${path_dirs[@]}"; do
    full=$(realpath -m -- "${dir:-.}")
    case $full in
        "$root") search_dirs[.]=1 ;;
        "$root"/*) search_dirs[${full#"$root"/}]=1 ;;
    esac
done

# Names of modules importable without the repository (installed or standard library): a new
# module of that name at the repository root shadows it, e.g. pytest.py under python -m pytest.
declare -A outside_modules=()
if command -v python3 > /dev/null; then
    while IFS= read -r name; do
        [ -n "$name" ] && outside_modules[$name]=1
    done < <(python3 -I - "$root" <<'EOF_AEM_MODULES'
import pkgutil
import sys

root = sys.argv[1]
outside = [p for p in sys.path if p and p != root and not p.startswith(root + "/")]
print("\n".join({*sys.builtin_module_names, *sys.stdlib_module_names,
                 *(m.name for m in pkgutil.iter_modules(outside))}))
EOF_AEM_MODULES
    )
fi

declare -A spec_paths=()
while IFS= read -r -d '' path; do
    spec_paths[$path]=1
done < "$spec"

is_guarded() {
    local path=$1 parent top
    [[ $path =~ $protected ]] && return 0
    [ -n "${spec_paths[$path]+set}" ] && return 0
    parent=$(dirname -- "$path")
    [ -n "${search_dirs[$parent]+set}" ] && return 0
    top=${path%%/*}
    [ -n "${outside_modules[${top%%.*}]+set}" ] && ! git cat-file -e "$base:$top" 2> /dev/null
}

while IFS= read -r -d '' path; do
    is_guarded "$path" || continue
    if git cat-file -e "$base:$path" 2> /dev/null; then
        rm -rf -- "$path"
        git checkout --quiet "$base" -- "$path" && printf 'restored %q\n' "$path"
    elif [ -e "$path" ] || [ -L "$path" ]; then
        rm -rf -- "$path" && printf 'removed %q\n' "$path"
    fi
done < <(changed_paths)
