/* sandboxd-init's image (init.h), built first and linked into sandboxd so
 * that sandboxd needs no file beside it: it copies this into a sealed memfd
 * at start and every run's init executes that. */
	.section .rodata
	.balign 16
	.globl sbx_init_elf
	.hidden sbx_init_elf
sbx_init_elf:
	.incbin SBX_INIT_PATH
	.globl sbx_init_elf_end
	.hidden sbx_init_elf_end
sbx_init_elf_end:
	.section .note.GNU-stack,"",%progbits
