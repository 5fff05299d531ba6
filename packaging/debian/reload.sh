# reload_user_managers makes every running user manager re-read its unit
# files, as `systemctl daemon-reload` does for the system manager: a user
# who starts mosaic-conv@ID.socket right after this sees the units just
# installed, upgraded or removed. A reload re-reads definitions only: it
# starts, stops and restarts nothing, so running conversations (their
# controllers and their engines) are never touched. dh_installsystemduser
# reloads nothing for user units; a user manager that misses this reload
# still finds the new files on its next start or `systemctl --user
# daemon-reload`, so a failure here only warns.
reload_user_managers() {
	for user in $(user_managers); do
		timeout 30 systemctl --user --machine="$user@" daemon-reload 2>/dev/null ||
			echo "mosaic: could not reload the user manager of $user; run as $user: systemctl --user daemon-reload" >&2
	done
}

# user_managers prints the name of each user whose manager runs (none in a
# chroot or an image being built).
user_managers() {
	[ -z "${DPKG_ROOT:-}" ] || return 0
	[ -d /run/systemd/system ] || return 0
	for unit in $(systemctl list-units --no-legend --plain --state=running 'user@*.service' 2>/dev/null | cut -d' ' -f1); do
		uid=${unit#user@}
		uid=${uid%.service}
		user=$(getent passwd "$uid" | cut -d: -f1) || continue
		[ -n "$user" ] && echo "$user"
	done
}
