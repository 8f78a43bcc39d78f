"""What learners run: the self-check of a notebook and its pytest plugin, the remote check and,
on a class server, the kernel provisioner that gives each kernel a cgroup of its own."""
