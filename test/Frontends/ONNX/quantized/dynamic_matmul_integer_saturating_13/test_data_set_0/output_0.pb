ByJ€:§žB:§žB:§žB:§žB:§žB:§žB:§žB:§žBãgç@	kîÀºGÁÏö @6¥ @¦‹›ÀhH¡@ÌŽ"ÀzšžBzšžBzšžBzšžBzšžBzšžBzšžBzšžB­(é@¡ˆïÀÔBÁÑ* @ËZ£@¥WœÀýý£@} À”lžB”lžB”lžB”lžB”lžB”lžB”lžB”lžB4
ó@˜PôÀ(&CÁg¢@™·¢@×úœÀÝÊ™@:ÀabžBabžBabžBabžBabžBabžBabžBabžBÜcë@uµëÀ„hHÁM±”@2	£@Ñ* ÀpL@
À