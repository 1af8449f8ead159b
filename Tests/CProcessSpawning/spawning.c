// pipe2 and posix_spawn_file_actions_addclosefrom_np (glibc 2.34) are GNU extensions that
// Swift's Glibc module, built without _GNU_SOURCE, does not declare.
#define _GNU_SOURCE
#include <fcntl.h>
#include <spawn.h>
#include <unistd.h>

#include "CProcessSpawning.h"

int spawning_pipe_close_on_exec(int fds[2]) {
    return pipe2(fds, O_CLOEXEC);
}

int spawning_add_close_from(posix_spawn_file_actions_t *actions, int lowest) {
    return posix_spawn_file_actions_addclosefrom_np(actions, lowest);
}
