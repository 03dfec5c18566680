module github.com/MrVSiK/gotry/dashboards

go 1.25

require (
	github.com/grafana/grafana-foundation-sdk/go v0.0.22 // indirect
	github.com/prometheus/prometheus v0.309.1 // indirect
)
