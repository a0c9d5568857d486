
	
userÃ