module qos-guard.bench/loadgen

go 1.22
