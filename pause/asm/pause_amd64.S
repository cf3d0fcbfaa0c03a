/*
 * The infra container's PID 1 on linux/amd64, as podrun's built infra
 * image runs it: the kubelet's pause.c in a few system calls, with no
 * runtime to start, so that each pod's sandbox costs a few KiB of memory.
 *
 * SIGINT, SIGTERM and SIGCHLD are blocked, then taken one at a time with
 * rt_sigtimedwait: SIGCHLD reaps every exited child (orphans are
 * re-parented to PID 1), SIGINT or SIGTERM exit 0. A blocked signal reaches
 * PID 1 of a PID namespace although it has no handler; an unblocked one
 * without a handler would be dropped.
 *
 * hack/gen-pause.sh assembles this into pause/program_amd64.go.
 */
	.globl	_start
	.text
_start:
	pushq	$0x14002		/* the set: bits SIGINT-1, SIGTERM-1, SIGCHLD-1 */
	xorl	%edi, %edi		/* SIG_BLOCK */
	movq	%rsp, %rsi		/* set */
	xorl	%edx, %edx		/* old set: not wanted */
	movl	$8, %r10d		/* sigsetsize */
	movl	$14, %eax		/* rt_sigprocmask */
	syscall
	jmp	reap			/* children that exited before the mask */
wait:
	movq	%rsp, %rdi		/* set */
	xorl	%esi, %esi		/* info: not wanted */
	xorl	%edx, %edx		/* timeout: none */
	movl	$8, %r10d		/* sigsetsize */
	movl	$128, %eax		/* rt_sigtimedwait */
	syscall
	cmpl	$17, %eax		/* SIGCHLD */
	je	reap
	cmpl	$2, %eax		/* SIGINT */
	je	exit
	cmpl	$15, %eax		/* SIGTERM */
	je	exit
	jmp	wait			/* interrupted: wait again */
reap:
	movl	$-1, %edi		/* any child */
	xorl	%esi, %esi		/* status: not kept */
	movl	$1, %edx		/* WNOHANG */
	xorl	%r10d, %r10d		/* rusage: not wanted */
	movl	$61, %eax		/* wait4 */
	syscall
	testl	%eax, %eax
	jg	reap			/* one reaped: SIGCHLDs coalesce, look again */
	jmp	wait
exit:
	xorl	%edi, %edi
	movl	$231, %eax		/* exit_group */
	syscall
