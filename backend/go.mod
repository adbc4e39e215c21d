module github.com/kbind/kbind/backend

go 1.26.0

require k8s.io/utils v0.0.0-20260626114624-be93311217bd
