/*
 * fake_libgshare.c — stands for libgshare in tests/gate/integ_gate.sh: a
 * process that has libgshare's gs_init (a level-2 job) must not be gated.
 */
int gs_init(void);

int gs_init(void)
{
	return 0;
}
