import { Center, Loader } from "@mantine/core";
import { lazy, Suspense } from "react";
import { Navigate, Route, Routes, useLocation } from "react-router-dom";
import { SessionProvider, useSessionQuery } from "../api/session";
import { LiveProvider } from "../live/LiveProvider";
import { LoginPage } from "./LoginPage";
import { Layout } from "./Layout";
import { PageBoundary } from "./PageBoundary";

const OverviewPage = lazy(() => import("../features/overview/OverviewPage"));
const CreatePage = lazy(() => import("../features/create/CreatePage"));
const DescribePage = lazy(() => import("../features/describe/DescribePage"));
const WorkloadsPage = lazy(() => import("../features/workloads/WorkloadsPage"));
const GpusPage = lazy(() => import("../features/gpus/GpusPage"));
const GpuDetailPage = lazy(() => import("../features/gpus/GpuDetailPage"));
const AlertsPage = lazy(() => import("../features/alerts/AlertsPage"));
const RecoveryPage = lazy(() => import("../features/recovery/RecoveryPage"));
const CostsPage = lazy(() => import("../features/costs/CostsPage"));
const AdminPage = lazy(() => import("../features/admin/AdminPage"));

function Loading() {
  return (
    <Center h="50vh">
      <Loader aria-label="Loading" />
    </Center>
  );
}

export function App() {
  const session = useSessionQuery();
  const { pathname } = useLocation();
  if (session.isPending) return <Loading />;
  if (!session.data) return <LoginPage />;
  return (
    <SessionProvider session={session.data}>
      <LiveProvider>
        <Layout>
        <PageBoundary page={pathname}>
        <Suspense fallback={<Loading />}>
          <Routes>
            <Route path="/" element={<OverviewPage />} />
            <Route path="/create" element={<CreatePage />} />
            <Route path="/describe" element={<DescribePage />} />
            <Route path="/workloads" element={<WorkloadsPage />} />
            <Route path="/gpus" element={<GpusPage />} />
            <Route path="/gpus/:uuid" element={<GpuDetailPage />} />
            <Route path="/alerts" element={<AlertsPage />} />
            <Route path="/recovery" element={<RecoveryPage />} />
            <Route path="/costs" element={<CostsPage />} />
            <Route path="/admin" element={<AdminPage />} />
            <Route path="*" element={<Navigate to="/" replace />} />
          </Routes>
        </Suspense>
        </PageBoundary>
        </Layout>
      </LiveProvider>
    </SessionProvider>
  );
}
