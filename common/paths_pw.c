/*
 * The passwd entry's home directory (common/paths.h, paths_passwd_home),
 * through glibc's name services.  In a file of its own so that spctl,
 * linked statically, can bring its own (client/main.c): glibc's getpwuid
 * in a static program would load the name service modules of whatever
 * glibc the host has at run time.
 */
#include <pwd.h>
#include <unistd.h>

#include "paths.h"

const char *paths_passwd_home(void)
{
	struct passwd *pw = getpwuid(geteuid());

	return pw && pw->pw_dir ? pw->pw_dir : NULL;
}
