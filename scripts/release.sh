#!/usr/bin/env bash
# Tags a release: scripts/release.sh VERSION [--dry-run]
#
# Run on the release commit (docs/UPGRADING.md, "Making a release"). It checks that
# the work tree is clean, that both pyproject.toml files (the service's and the
# client's) say VERSION, that CHANGELOG.md has a "## [VERSION] - YYYY-MM-DD"
# section, and that the tag does not exist yet; then it creates the annotated tag
# vVERSION on HEAD with that section as its message. It never pushes: pushing the
# tag (git push origin vVERSION) is the step that publishes. --dry-run checks
# everything and prints the tag it would create, changing nothing.
set -euo pipefail

die() { printf 'release: %s\n' "$*" >&2; exit 1; }

version=""
dry_run=0
for arg in "$@"; do
    case "$arg" in
        --dry-run) dry_run=1 ;;
        -*) die "unknown option $arg (usage: scripts/release.sh VERSION [--dry-run])" ;;
        *) [ -z "$version" ] || die "one VERSION only"; version=$arg ;;
    esac
done
[ -n "$version" ] || die "usage: scripts/release.sh VERSION [--dry-run]"
# Releases are plain X.Y.Z (a pre-release may add aN, bN or rcN, as PEP 440 spells it).
[[ "$version" =~ ^[0-9]+\.[0-9]+\.[0-9]+((a|b|rc)[0-9]+)?$ ]] \
    || die "VERSION must look like 1.2.3 (or 1.2.3rc1), not '$version'"
tag="v$version"

cd "$(git rev-parse --show-toplevel)"
PYTHON=${PYTHON:-python3}

[ -z "$(git status --porcelain)" ] || die "the work tree is not clean (git status): commit or stash first"

for pyproject in pyproject.toml clients/python/pyproject.toml; do
    declared=$("$PYTHON" -c 'import sys, tomllib
print(tomllib.load(open(sys.argv[1], "rb"))["project"]["version"])' "$pyproject") \
        || die "cannot read the version in $pyproject"
    [ "$declared" = "$version" ] || die "$pyproject says version $declared, not $version"
done

# The section's heading, as Keep a Changelog writes it: "## [1.2.3] - 2026-12-06".
heading="## [$version] - "
grep -qF -- "$heading" CHANGELOG.md \
    || die "CHANGELOG.md has no '## [$version] - YYYY-MM-DD' section: move Unreleased there"
notes=$(awk -v heading="$heading" '
    index($0, heading) == 1 { inside = 1; next }
    inside && /^## \[/ { exit }
    inside { print }
' CHANGELOG.md)
[ -n "$(printf '%s' "$notes" | tr -d '[:space:]')" ] || die "CHANGELOG.md's $version section is empty"

if git rev-parse -q --verify "refs/tags/$tag" >/dev/null; then
    die "tag $tag exists already (on $(git rev-list -n 1 "$tag"))"
fi

message=$(printf 'Siesta Runtime %s\n%s\n' "$version" "$notes")
commit=$(git rev-parse --short HEAD)
if [ "$dry_run" -eq 1 ]; then
    printf 'release: would tag %s on %s (dry run: nothing changed)\n\n%s\n' "$tag" "$commit" "$message"
    exit 0
fi
git tag -a "$tag" -m "$message"
printf 'release: tagged %s on %s; publish it with: git push origin %s\n' "$tag" "$commit" "$tag"
