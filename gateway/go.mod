module burnlab/gateway

go 1.26
