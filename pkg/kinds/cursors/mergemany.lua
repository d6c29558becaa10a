for i = 1, #ARGV, 2 do merge(KEYS[1], ARGV[i], ARGV[i+1], "0", ARGV[i+1]) end
return 1
