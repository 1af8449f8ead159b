#ifndef C_PROCESS_SPAWNING_H
#define C_PROCESS_SPAWNING_H

#include <spawn.h>

/// pipe2(fds, O_CLOEXEC): both ends close on exec, atomically with their creation.
int spawning_pipe_close_on_exec(int fds[2]);

/// posix_spawn_file_actions_addclosefrom_np: the child closes every descriptor >= lowest.
int spawning_add_close_from(posix_spawn_file_actions_t *actions, int lowest);

#endif
