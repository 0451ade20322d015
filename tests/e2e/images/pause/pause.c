/* The pod sandbox's process (the "pause" container): holds the pod's namespaces, reaps the
 * zombies a shared PID namespace leaves it, and exits on SIGINT or SIGTERM. Built here
 * (gcc -static) because no image registry is reachable from the e2e suite's machine. */
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void quit(int sig) { _exit(sig == SIGTERM || sig == SIGINT ? 0 : 1); }

static void reap(int sig) {
    (void)sig;
    while (waitpid(-1, NULL, WNOHANG) > 0) {
    }
}

int main(void) {
    struct sigaction on_quit = {.sa_handler = quit};
    struct sigaction on_child = {.sa_handler = reap, .sa_flags = SA_NOCLDSTOP};
    if (sigaction(SIGINT, &on_quit, NULL) < 0 || sigaction(SIGTERM, &on_quit, NULL) < 0 ||
        sigaction(SIGCHLD, &on_child, NULL) < 0)
        return 1;
    for (;;)
        pause();
}
