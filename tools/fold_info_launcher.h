/* fold_info -L (fold_info_launcher.c). */
#ifndef FOLD_INFO_LAUNCHER_H
#define FOLD_INFO_LAUNCHER_H

void fold_info_print_launcher(void);

#endif
