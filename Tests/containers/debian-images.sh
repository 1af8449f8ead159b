# Sourced by Tests/containers/base-images and Tests/containers/service-images: how both keep,
# pull or make from Debian the images they provide. PULL_TIMEOUT (seconds, default 30; 0 skips
# the attempt) bounds a pull; DEBIAN_MIRROR and DEBIAN_SECURITY_MIRROR name Debian's archives.
# shellcheck shell=bash disable=SC2034  # the arrays are the sourcing script's to use

PULL_TIMEOUT=${PULL_TIMEOUT:-30}
DEBIAN=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
DEBIAN_SECURITY=${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
PATH_ENV='ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'

# The sources Docker Hub's images of Debian release $1 (bookworm, trixie) use, one a line.
debian_sources() {
  printf '%s\n' "deb $DEBIAN $1 main" "deb $DEBIAN $1-updates main" "deb $DEBIAN_SECURITY $1-security main"
}

# Docker Hub's images are made by debuerreotype, which sets these; the slim variant adds the
# dpkg exclusions. Without the apt settings an `apt-get install` layer keeps apt's package
# caches (/var/cache/apt/*.bin, tens of MB) and the downloaded .deb files.
apt_options=(
  --aptopt='DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; }'
  --aptopt='Dir::Cache::pkgcache ""'
  --aptopt='Dir::Cache::srcpkgcache ""'
  --aptopt='Acquire::GzipIndexes "true"'
  --aptopt='Acquire::Languages "none"'
  --aptopt='Apt::AutoRemove::SuggestsImportant "false"'
)
slim_dpkg_options=(
  --dpkgopt='path-exclude=/usr/share/doc/*'
  --dpkgopt='path-include=/usr/share/doc/*/copyright'
  --dpkgopt='path-exclude=/usr/share/man/*'
  --dpkgopt='path-exclude=/usr/share/groff/*'
  --dpkgopt='path-exclude=/usr/share/info/*'
  --dpkgopt='path-exclude=/usr/share/lintian/*'
  --dpkgopt='path-exclude=/usr/share/linda/*'
  --dpkgopt='path-exclude=/usr/share/locale/*'
)

# True when podman's store has image $1 or it could be pulled within PULL_TIMEOUT; says which.
present_or_pulled() {
  local image=$1
  if podman image exists "$image"; then
    echo "$image: present"
    return 0
  fi
  if [ "$PULL_TIMEOUT" != 0 ] && timeout "$PULL_TIMEOUT" podman pull -q "$image" >/dev/null 2>&1; then
    echo "$image: pulled"
    return 0
  fi
  return 1
}
